"""The `doom` family: ViZDoom scenarios. `family.py` registers it (and imports vizdoom);
`schema.py` types its config node without importing vizdoom."""
