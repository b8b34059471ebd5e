"""Parts of console.settings kept in modules of their own (the settings module stays readable)."""
