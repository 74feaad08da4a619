"""The ``precision`` command: the top layer, the only package that imports all the others."""
