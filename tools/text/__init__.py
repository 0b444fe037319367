"""Text handling: loading files, chunking, the tokeniser and stopwords, token counting and terminal-safe text."""
