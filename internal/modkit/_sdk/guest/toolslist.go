package guest

import (
	"errors"

	"github.com/edge-mcp/edge-mcp/guest/jsonlite"
)

// ToolsList is the input of the tools_list hook: the tools of the catalogue
// that this module's attachment matches, as the given client would see them.
type ToolsList struct {
	Client Client
	Tools  []ListedTool
}

// ListedTool is one catalogue entry. Change it with Hide, Rename, Describe,
// Retitle and Annotate; entries left alone are reported as unchanged.
type ListedTool struct {
	// Server and Name are the upstream server and the tool's upstream name.
	Server string
	Name   string
	// Definition is the raw tool object (name, description, inputSchema,
	// annotations, ...) as the client would receive it so far.
	Definition []byte

	hide        bool
	rename      string
	description *string
	title       *string
	annotations []annotation
}

type annotation struct {
	key string
	raw []byte
}

// Description returns the tool's current description.
func (t *ListedTool) Description() string {
	raw, ok := jsonlite.Lookup(t.Definition, "description")
	if !ok {
		return ""
	}
	s, _ := jsonlite.Unquote(raw)
	return s
}

// Hide removes the tool from this client's catalogue.
func (t *ListedTool) Hide() { t.hide = true }

// Rename shows the tool under another name (1-128 characters of
// A-Z a-z 0-9 _ . -). Calls made with the new name reach the original tool.
func (t *ListedTool) Rename(name string) { t.rename = name }

// Describe replaces the tool's description.
func (t *ListedTool) Describe(description string) { t.description = &description }

// Retitle replaces the tool's human-readable title.
func (t *ListedTool) Retitle(title string) { t.title = &title }

// Annotate sets one key of the tool's annotations object to a raw JSON value,
// e.g. Annotate("readOnlyHint", []byte("true")).
func (t *ListedTool) Annotate(key string, rawJSON []byte) {
	t.annotations = append(t.annotations, annotation{key: key, raw: rawJSON})
}

func (t *ListedTool) changed() bool {
	return t.hide || t.rename != "" || t.description != nil || t.title != nil || len(t.annotations) > 0
}

func parseToolsList(in []byte) (*ToolsList, error) {
	req := &ToolsList{}
	var err error
	perr := jsonlite.Members(in, func(k, v []byte) bool {
		switch string(k) {
		case "client":
			err = req.Client.parse(v)
		case "tools":
			err = jsonlite.Elements(v, func(e []byte) bool {
				var t ListedTool
				err = jsonlite.Members(e, func(k, v []byte) bool {
					switch string(k) {
					case "server":
						t.Server, err = jsonlite.Unquote(v)
					case "name":
						t.Name, err = jsonlite.Unquote(v)
					case "tool":
						t.Definition = v
					}
					return err == nil
				})
				req.Tools = append(req.Tools, t)
				return err == nil
			})
		}
		return err == nil
	})
	if perr != nil {
		return nil, perr
	}
	if err != nil {
		return nil, err
	}
	for i := range req.Tools {
		if req.Tools[i].Name == "" {
			return nil, errors.New("tool entry without a name")
		}
	}
	return req, nil
}

func (req *ToolsList) appendOutput(dst []byte) []byte {
	n := 0
	for i := range req.Tools {
		t := &req.Tools[i]
		if !t.changed() {
			continue
		}
		if n == 0 {
			dst = append(dst, `{"tools":[`...)
		} else {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, `{"server":`...)
		dst = jsonlite.AppendString(dst, t.Server)
		dst = append(dst, `,"name":`...)
		dst = jsonlite.AppendString(dst, t.Name)
		if t.hide {
			dst = append(dst, `,"hide":true}`...)
			continue
		}
		if t.rename != "" {
			dst = append(dst, `,"rename":`...)
			dst = jsonlite.AppendString(dst, t.rename)
		}
		if t.description != nil {
			dst = append(dst, `,"description":`...)
			dst = jsonlite.AppendString(dst, *t.description)
		}
		if t.title != nil {
			dst = append(dst, `,"title":`...)
			dst = jsonlite.AppendString(dst, *t.title)
		}
		if len(t.annotations) > 0 {
			dst = append(dst, `,"annotations":{`...)
			for j, a := range t.annotations {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = jsonlite.AppendString(dst, a.key)
				dst = append(dst, ':')
				dst = append(dst, a.raw...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	if n == 0 {
		return dst
	}
	return append(dst, "]}"...)
}
