// Command kubectl-elasti is the kubectl plugin for Elasti: `kubectl elasti`.
package main

import (
	"os"

	"elasti.dev/elasti/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
