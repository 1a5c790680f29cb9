"""Prices and guards of the numeric layer: size and memory checks, time prices, the watchdog."""
