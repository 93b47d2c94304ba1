package chattmpl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/ardanlabs/jinja"
)

// Object is a JSON object that keeps its key order. Templates print tool schemas and
// arguments with tojson, which must list keys in the order they were given (a Go map would
// sort or shuffle them and change the prompt).
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty ordered object.
func NewObject() *Object { return &Object{vals: map[string]any{}} }

// Set adds or replaces a key; a new key goes last. It returns o for chaining.
func (o *Object) Set(key string, v any) *Object {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = v
	return o
}

// Get returns a key's value.
func (o *Object) Get(key string) (any, bool) {
	v, ok := o.vals[key]
	return v, ok
}

// Keys lists the keys in order.
func (o *Object) Keys() []string { return append([]string(nil), o.keys...) }

// DecodeJSON reads one JSON value, keeping object key order: objects become *Object,
// arrays []any, numbers int64 when integral (else float64), and the rest bool, string, nil.
func DecodeJSON(r io.Reader) (any, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, fmt.Errorf("chattmpl: json: %w", err)
	}
	return v, nil
}

// DecodeJSONBytes is DecodeJSON on a byte slice.
func DecodeJSONBytes(b []byte) (any, error) { return DecodeJSON(bytes.NewReader(b)) }

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			o := NewObject()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				val, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.Set(k.(string), val)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			list := []any{}
			for dec.More() {
				val, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, val)
			}
			_, err := dec.Token()
			return list, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return tok, nil // string, bool, nil
}

// toValue converts Go data to the template engine's values. Plain maps are sorted by key
// (use *Object to fix an order).
func toValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case nil:
		return jinja.None(), nil
	case jinja.Value:
		return x, nil
	case bool:
		return jinja.NewBool(x), nil
	case string:
		return jinja.NewString(x), nil
	case int:
		return jinja.NewInt(int64(x)), nil
	case int32:
		return jinja.NewInt(int64(x)), nil
	case int64:
		return jinja.NewInt(x), nil
	case float32:
		return jinja.NewFloat(float64(x)), nil
	case float64:
		return jinja.NewFloat(x), nil
	case *Object:
		d := jinja.NewDict()
		for _, k := range x.keys {
			e, err := toValue(x.vals[k])
			if err != nil {
				return jinja.Value{}, fmt.Errorf("%s: %w", k, err)
			}
			d.AsDict().Set(k, e)
		}
		return d, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := NewObject()
		for _, k := range keys {
			o.Set(k, x[k])
		}
		return toValue(o)
	case []any:
		items := make([]jinja.Value, len(x))
		for i, e := range x {
			var err error
			if items[i], err = toValue(e); err != nil {
				return jinja.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return jinja.NewList(items), nil
	case []string:
		items := make([]jinja.Value, len(x))
		for i, e := range x {
			items[i] = jinja.NewString(e)
		}
		return jinja.NewList(items), nil
	}
	return jinja.Value{}, fmt.Errorf("unsupported value type %T", v)
}
