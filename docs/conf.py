"""Sphinx configuration for the scrapy-irl documentation."""

project = "scrapy-irl"
author = "the scrapy-irl developers"
extensions = ["sphinx.ext.autodoc"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
nitpicky = False
