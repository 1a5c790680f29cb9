"""Prices of the commands that train: time, memory, FLOPs."""
