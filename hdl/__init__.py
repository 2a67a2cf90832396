"""Amaranth RTL of the Trainium2-class machine (see ``python -m hdl --help``)."""
