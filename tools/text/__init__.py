"""Text handling: loading files (markdown, MyST, HTML, PDF) and chunking them, sentences and code blocks, the
tokeniser and stopwords, token counting, hidden and invisible text, and terminal-safe text."""
