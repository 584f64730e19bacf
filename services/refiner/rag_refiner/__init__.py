"""The refiner service."""
