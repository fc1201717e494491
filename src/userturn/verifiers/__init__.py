"""Verifiers: pure functions that score an assistant response against a dataset's gold fields."""
