"""Deliberately wrong implementations: the kit must catch each one."""
