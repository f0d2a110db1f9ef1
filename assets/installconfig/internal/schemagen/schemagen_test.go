package schemagen

import (
	"reflect"
	"testing"
)

// TestLoadQualifiesImportedTypes checks that a type of a package that
// types.go imports is named with its package in front, in the table, in
// the references to it and in its doc, so that it cannot collide with a
// type of package types of the same name.
func TestLoadQualifiesImportedTypes(t *testing.T) {
	got, err := Load("testdata/types")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Type{
		"Config": {Name: "Config", Doc: "Config is the root.", Fields: []Field{
			{Name: "platform", Type: "object", Ref: "Platform", Doc: "platform picks one."}}},
		"Platform": {Name: "Platform", Doc: "Platform holds the sections.", Fields: []Field{
			{Name: "sub", Type: "object", Ref: "SubPlatform", Doc: "sub is a section in another package."}}},
		"SubPlatform": {Name: "SubPlatform", Doc: "SubPlatform is the sub platform's section.", Fields: []Field{
			{Name: "pools", Type: "[]object", Ref: "SubPool", Doc: "pools are its pools."}}},
		"SubPool": {Name: "SubPool", Doc: "SubPool is a pool of the sub platform.", Fields: []Field{
			{Name: "size", Type: "integer", Doc: "size is how many."}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := Load("testdata/types/sub"); err == nil {
		t.Error("Load of a directory without types.go succeeded")
	}
}
