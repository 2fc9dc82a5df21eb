"""The `gym` family: any registered gymnasium id (`family.py`)."""
