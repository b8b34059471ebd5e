"""OpenSM artefacts: renderers, the project's own parsers of OpenSM's grammars, linters, swap."""
