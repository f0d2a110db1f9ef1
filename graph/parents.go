package graph

import (
	"fmt"
	"reflect"
)

// parents is the Parents a node's Generate receives: the generated values of
// exactly the dependencies it declared; or, with ancestors set, what
// CheckAdopted receives: those of its dependencies, transitively.
type parents struct {
	owner     string
	nodes     map[string]*node
	ancestors bool
}

// Get copies each declared parent's value into the given pointer. The copy is
// shallow: treat parents' values as read-only.
func (p parents) Get(assets ...Asset) error {
	for _, a := range assets {
		n, ok := p.nodes[a.ID()]
		if !ok && p.ancestors {
			return fmt.Errorf("asset %s reads %s, which is none of its dependencies nor of theirs", p.owner, a.ID())
		}
		if !ok {
			return fmt.Errorf("asset %s reads %s, which it does not declare in Dependencies()", p.owner, a.ID())
		}
		if err := copyAsset(a, n.asset); err != nil {
			return err
		}
	}
	return nil
}

// copyAsset sets *dst to *src; both must be non-nil pointers of the same type.
func copyAsset(dst, src Asset) error {
	if dst == src {
		return nil
	}
	dv, sv := reflect.ValueOf(dst), reflect.ValueOf(src)
	if dv.Kind() != reflect.Pointer || dv.IsNil() {
		return fmt.Errorf("asset %s: want a non-nil pointer, got %T", dst.ID(), dst)
	}
	if dv.Type() != sv.Type() {
		return fmt.Errorf("asset %s: is a %T, asked for as a %T", dst.ID(), src, dst)
	}
	dv.Elem().Set(sv.Elem())
	return nil
}
