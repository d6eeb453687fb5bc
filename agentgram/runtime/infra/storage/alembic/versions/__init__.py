"""The schema's revisions, one file each, named ``v<NNNN>_<what>.py`` with revision id ``<NNNN>``."""
