package config

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"time"
)

// This file decodes values along the key table: object walks a JSON object
// whose keys are the table's entries below a pattern, and value decodes one
// entry into the Go field its accessor points at.

// object decodes the JSON object at path into parent, whose keys are the
// table entries below pattern pat ("" for the file, "mcpServers.*" for a
// server, "auth.api_keys[]" for an element of a list). Defaults are set
// first; unknown and repeated keys are errors.
func (d *decoder) object(path, pat string, parent any) *Error {
	for _, k := range keysBelow[pat] {
		if k.value != nil {
			reflect.ValueOf(k.field(parent)).Elem().Set(reflect.ValueOf(k.value))
		}
	}
	return d.members(path, "duplicate key", func(name, kpath string) *Error {
		k := keysByName[configJoin(pat, name)]
		if k == nil {
			return d.fail(kpath, "%s", unknownKey(pat, name))
		}
		if m, ok := parent.(interface{ mark(key string) }); ok {
			m.mark(name)
		}
		return d.value(k, kpath, parent)
	})
}

// value decodes the value of k at path into parent, then checks it.
func (d *decoder) value(k *key, path string, parent any) *Error {
	if k.decode != nil {
		return k.decode(d, path, parent)
	}
	p := k.field(parent)
	switch f := p.(type) {
	case *[]string:
		return d.strings(k, path, f)
	case *[]configString:
		return d.array(path, "strings", func(ipath string) *Error {
			cs, cerr := d.str(ipath)
			*f = append(*f, cs)
			return cerr
		})
	case *map[string]string:
		return d.stringMap(k, path, f)
	case *[]configPair:
		return d.members(path, "duplicate key", func(name, npath string) *Error {
			cs, cerr := d.str(npath)
			*f = append(*f, configPair{key: name, val: cs})
			return cerr
		})
	case *configString:
		var cerr *Error
		*f, cerr = d.str(path)
		return cerr
	}
	if isSection(p) {
		return d.section(k, path, p)
	}
	if cerr := d.scalar(path, p); cerr != nil {
		return cerr
	}
	return d.check(k, path, p)
}

// check runs k's check on the decoded value at p.
func (d *decoder) check(k *key, path string, p any) *Error {
	if k.check == nil {
		return nil
	}
	at, reason := k.check(p)
	switch {
	case reason == "":
		return nil
	case at != "":
		path = configJoin(path, at)
	}
	return d.fail(path, "%s", reason)
}

// scalar decodes a string, boolean or number into p.
func (d *decoder) scalar(path string, p any) *Error {
	var cerr *Error
	switch f := p.(type) {
	case *string:
		*f, cerr = d.expanded(path)
	case *bool:
		*f, cerr = d.boolean(path)
	case **bool:
		var b bool
		b, cerr = d.boolean(path)
		*f = &b
	case *int:
		*f, cerr = d.whole(path)
	case **int:
		var n int
		n, cerr = d.whole(path)
		*f = &n
	case *int64:
		*f, cerr = d.bytes(path)
	case *float64:
		*f, cerr = d.float(path)
	case **float64:
		var x float64
		x, cerr = d.float(path)
		*f = &x
	case *time.Duration:
		*f, cerr = d.seconds(path)
	default:
		panic("config: no decoder for " + reflect.TypeOf(p).String() + " at " + path)
	}
	return cerr
}

// expanded reads a JSON string at key and expands it.
func (d *decoder) expanded(key string) (string, *Error) {
	cs, cerr := d.str(key)
	if cerr != nil {
		return "", cerr
	}
	return d.expand(cs)
}

// strings reads an array of strings, expanding and checking each one.
func (d *decoder) strings(k *key, path string, list *[]string) *Error {
	return d.array(path, "strings", func(ipath string) *Error {
		s, cerr := d.expanded(ipath)
		if cerr != nil {
			return cerr
		}
		*list = append(*list, s)
		return d.check(k, ipath, &s)
	})
}

// stringMap reads an object of strings, expanding each value; the whole
// map is checked once read.
func (d *decoder) stringMap(k *key, path string, m *map[string]string) *Error {
	cerr := d.members(path, "duplicate key", func(name, npath string) *Error {
		s, cerr := d.expanded(npath)
		if *m == nil {
			*m = make(map[string]string)
		}
		(*m)[name] = s
		return cerr
	})
	if cerr != nil {
		return cerr
	}
	return d.check(k, path, m)
}

func (d *decoder) boolean(key string) (bool, *Error) {
	t, cerr := d.token(key)
	if cerr != nil {
		return false, cerr
	}
	b, ok := t.(bool)
	if !ok {
		return false, d.fail(key, "must be true or false, got %s", configShow(t))
	}
	return b, nil
}

// number reads a JSON number at key; want describes it for the error.
func (d *decoder) number(key, want string) (json.Number, *Error) {
	t, cerr := d.token(key)
	if cerr != nil {
		return "", cerr
	}
	n, ok := t.(json.Number)
	if !ok {
		return "", d.fail(key, "must be %s, got %s", want, configShow(t))
	}
	return n, nil
}

// whole reads a whole number at key.
func (d *decoder) whole(key string) (int, *Error) {
	n, cerr := d.number(key, "a number")
	if cerr != nil {
		return 0, cerr
	}
	v, exact, inRange := configScaled(string(n), 0)
	if !exact || !inRange || v != int64(int(v)) {
		return 0, d.fail(key, "must be a whole number, got %s", n)
	}
	return int(v), nil
}

// float reads a finite number at key.
func (d *decoder) float(key string) (float64, *Error) {
	n, cerr := d.number(key, "a number")
	if cerr != nil {
		return 0, cerr
	}
	x, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, d.fail(key, "must be a finite number, got %s", n)
	}
	return x, nil
}

// bytes reads a positive whole number of bytes at key.
func (d *decoder) bytes(key string) (int64, *Error) {
	const want = "a positive whole number of bytes"
	n, cerr := d.number(key, want)
	if cerr != nil {
		return 0, cerr
	}
	v, exact, inRange := configScaled(string(n), 0)
	switch {
	case !inRange:
		return 0, d.fail(key, "must be at most %d bytes, got %s", int64(math.MaxInt64), n)
	case !exact || v <= 0:
		return 0, d.fail(key, "must be %s, got %s", want, n)
	}
	return v, nil
}

// seconds reads a positive number of seconds at key.
func (d *decoder) seconds(key string) (time.Duration, *Error) {
	const want = "a positive number of seconds"
	n, cerr := d.number(key, want)
	if cerr != nil {
		return 0, cerr
	}
	v, _, inRange := configScaled(string(n), 9)
	switch {
	case !inRange:
		return 0, d.fail(key, "must be at most %d seconds, got %s", int64(math.MaxInt64/int64(time.Second)), n)
	case v <= 0:
		return 0, d.fail(key, "must be %s, got %s", want, n)
	}
	return time.Duration(v), nil
}

// section decodes the JSON object at path into the struct p points at (a
// pointer to a pointer is allocated: an optional section such as
// auth.jwt), or appends each object of a JSON array to the slice p points
// at; k's check runs on each struct.
func (d *decoder) section(k *key, path string, p any) *Error {
	v := reflect.ValueOf(p).Elem()
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		p = v.Interface()
	case reflect.Slice:
		v.Set(reflect.Zero(v.Type()))
		return d.array(path, "objects", func(ipath string) *Error {
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			e := v.Index(v.Len() - 1).Addr().Interface()
			if cerr := d.object(ipath, k.name+"[]", e); cerr != nil {
				return cerr
			}
			return d.check(k, ipath, e)
		})
	}
	if cerr := d.object(path, k.name, p); cerr != nil {
		return cerr
	}
	return d.check(k, path, p)
}

// isSection reports whether p points at a struct, a pointer to one or a
// slice of them: a value decoded by section.
func isSection(p any) bool {
	t := reflect.TypeOf(p).Elem()
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}
