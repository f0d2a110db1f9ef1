// Package graph is kiln's asset engine: assets declare their dependencies,
// the engine resolves them depth-first with cycle detection, generates
// independent branches in parallel, persists every generated asset in a state
// file in --dir and lets files the user edited on disk win over that state.
package graph
