"""The `doom` family: ViZDoom scenarios. `family.py` holds `DoomFamily` (and imports vizdoom);
`schema.py` types its config node without importing vizdoom."""
