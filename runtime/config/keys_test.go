package config

import (
	"reflect"
	"testing"
)

// TestKeyTable checks each entry of the key table: a doc line, a type the
// configuration reference knows, a default of the field's type, and a way to decode.
func TestKeyTable(t *testing.T) {
	types := map[string]bool{"string": true, "bool": true, "number": true, "number (s)": true, "[string]": true, "object": true, "[object]": true, "string or [string]": true}
	for _, table := range [][]key{keys, serverKeys, sectionKeys} {
		for i := range table {
			k := &table[i]
			t.Run(k.name, func(t *testing.T) {
				if k.doc == "" {
					t.Error("no doc")
				}
				if (k.field == nil) == (k.decode == nil) {
					t.Fatal("needs exactly one of field and decode")
				}
				if !types[k.typeName()] {
					t.Errorf("type %q is not one the configuration reference knows", k.typeName())
				}
				if k.value != nil {
					if k.def != "" {
						t.Error("has both value and def")
					}
					if want := reflect.TypeOf(k.field(nil)).Elem(); reflect.TypeOf(k.value) != want {
						t.Errorf("default is a %T, the field a %v", k.value, want)
					}
				}
				if keysByName[k.name] != k {
					t.Error("another key has the same name")
				}
			})
		}
	}
}
