"""The `dmlab` family slot: configs exist so experiments compose; no adapter is written until
deepmind_lab can be installed and tested here (it is built from source, not on PyPI)."""
