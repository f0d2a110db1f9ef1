package netd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// entry is one kernel object netd owns (a route, a neighbour, a forwarding
// entry, an address): what identifies it, the state it should have, and the
// commands that install and remove it. Listings and wishes are both read
// into entries, so the commands are written once.
type entry struct {
	key, state string
	add, del   []string
}

// entrySet is what netd wants of one kind of entry and what the node has.
type entrySet struct {
	want, have []entry
}

// syncSets installs each wanted entry that is missing or in another state,
// set by set, then removes what is no longer wanted, set by set in reverse
// order (in key order within a set): a tunnel's forwarding entry comes
// before the route that uses it, and goes after it.
func syncSets(ctx context.Context, cfg Config, sets ...entrySet) error {
	for _, s := range sets {
		installed := map[string]string{}
		for _, e := range s.have {
			installed[e.key] = e.state
		}
		for _, e := range s.want {
			if state, ok := installed[e.key]; ok && state == e.state {
				continue
			}
			if err := run(ctx, cfg, e.add); err != nil {
				return err
			}
		}
	}
	for i := len(sets) - 1; i >= 0; i-- {
		wanted := map[string]bool{}
		for _, e := range sets[i].want {
			wanted[e.key] = true
		}
		stale := append([]entry(nil), sets[i].have...)
		sort.Slice(stale, func(a, b int) bool { return stale[a].key < stale[b].key })
		for _, e := range stale {
			if wanted[e.key] {
				continue
			}
			if err := run(ctx, cfg, e.del); err != nil {
				return err
			}
		}
	}
	return nil
}

// run runs a command that changes the node and logs it.
func run(ctx context.Context, cfg Config, argv []string) error {
	if out, err := cfg.Runner.Run(ctx, argv...); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	cfg.Log.Infof("%s", strings.Join(argv, " "))
	return nil
}

// listJSON runs a listing command of iproute2 with -j and decodes its
// output into v; no output is an empty list.
func listJSON(ctx context.Context, r Runner, v any, argv ...string) error {
	out, err := r.Run(ctx, argv...)
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}
