"""Data: golden vectors, scenario files and the requirement/profile registry, loaded and checked."""
