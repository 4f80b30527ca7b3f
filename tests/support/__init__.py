"""Helpers shared by tests in several directories."""
