#!/usr/bin/env bash
# 'make demo' is not built yet; see README.md's "What works today".
echo "make demo: not implemented yet; see README.md, What works today" >&2
exit 2
