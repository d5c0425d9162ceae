"""The write path: propose -> policy -> decide -> commit -> index."""
