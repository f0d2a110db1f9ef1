package graph

import (
	"fmt"
	"io"
	"sort"
	"strconv"
)

// WriteDot prints the dependency graph of roots as Graphviz dot: one node per
// asset ID labelled with its name, one edge from each dependency to its
// dependent (the direction data flows). The output is sorted, so it is stable
// for a given set of assets. A cycle is an error naming its path.
func WriteDot(w io.Writer, roots ...Asset) error {
	names := map[string]string{}
	var edges [][2]string
	err := walk(roots, func(a Asset, deps []Asset) {
		names[a.ID()] = a.Name()
		for _, d := range deps {
			edges = append(edges, [2]string{d.ID(), a.ID()})
		}
	})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(names))
	for id := range names {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	sort.Slice(edges, func(i, j int) bool {
		if edges[i][0] != edges[j][0] {
			return edges[i][0] < edges[j][0]
		}
		return edges[i][1] < edges[j][1]
	})
	if _, err := fmt.Fprintln(w, "digraph kiln {\n  rankdir=LR;\n  node [shape=box];"); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := fmt.Fprintf(w, "  %s [label=%s];\n", strconv.Quote(id), strconv.Quote(names[id])); err != nil {
			return err
		}
	}
	for i, e := range edges {
		if i > 0 && e == edges[i-1] {
			continue
		}
		if _, err := fmt.Fprintf(w, "  %s -> %s;\n", strconv.Quote(e[0]), strconv.Quote(e[1])); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintln(w, "}")
	return err
}
