"""Doom maps built from code (UDMF + DECORATE into a WAD) for the battle scenarios."""
