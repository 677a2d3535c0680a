"""Puts tests/ on sys.path, so every test folder can `import tooling`."""
