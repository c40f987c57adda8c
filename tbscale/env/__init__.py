"""Sandboxes: Docker containers through the docker SDK."""
