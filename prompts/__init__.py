"""Every prompt reground sends, as data. Context fields default to these so users can override them."""
