package schema_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edge-mcp/edge-mcp/internal/schema"
)

func ExampleValidator_Validate() {
	v := schema.NewValidator(128)
	inputSchema := json.RawMessage(`{
	  "type": "object",
	  "properties": {
	    "location": {
	      "type": "object",
	      "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
	      "required": ["city"]
	    }
	  },
	  "required": ["location"]
	}`)

	err := v.Validate(inputSchema, json.RawMessage(`{"location":{"city":"Oslo","zip":"0150"}}`))
	fmt.Println(err)

	var verr *schema.ValidationError
	if errors.As(err, &verr) {
		fmt.Printf("path=%q message=%q\n", verr.Path, verr.Message)
	}

	err = v.Validate(json.RawMessage(`{"$ref": "https://example.com/s.json"}`), nil)
	fmt.Println(errors.Is(err, schema.ErrBadSchema))
	// Output:
	// arguments/location/zip: got string, want integer
	// path="/location/zip" message="got string, want integer"
	// true
}
