package graph

import (
	"fmt"
	"reflect"
)

// walk visits every asset reachable from roots once, dependencies before
// dependents, in a deterministic order (roots and Dependencies() in their
// given order). It reports a dependency cycle with its path and two types
// claiming the same ID.
func walk(roots []Asset, visit func(a Asset, deps []Asset)) error {
	const (
		active = 1
		done   = 2
	)
	state := map[string]int{}
	types := map[string]reflect.Type{}
	var stack []string
	var dfs func(a Asset) error
	dfs = func(a Asset) error {
		id := a.ID()
		if t, ok := types[id]; ok && t != reflect.TypeOf(a) {
			return fmt.Errorf("asset ID %q is used by two types, %v and %T", id, t, a)
		}
		types[id] = reflect.TypeOf(a)
		switch state[id] {
		case done:
			return nil
		case active:
			start := 0
			for i, s := range stack {
				if s == id {
					start = i
				}
			}
			cycle := append(append([]string{}, stack[start:]...), id)
			return &CycleError{Cycle: cycle}
		}
		state[id] = active
		stack = append(stack, id)
		deps := a.Dependencies()
		for _, d := range deps {
			if err := dfs(d); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
		if visit != nil {
			visit(a, deps)
		}
		return nil
	}
	for _, r := range roots {
		if err := dfs(r); err != nil {
			return err
		}
	}
	return nil
}
