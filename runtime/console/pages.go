package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edge-mcp/edge-mcp/internal/ociwasm"
	"github.com/edge-mcp/edge-mcp/policy/spec"
	"github.com/edge-mcp/edge-mcp/runtime/admin"
	"github.com/edge-mcp/edge-mcp/runtime/fleet"
)

// pageSize is how many tools one catalogue page lists.
const pageSize = 100

type overviewData struct {
	Upstreams  []Upstream
	Stats      map[string]ServerStat // by upstream, since Since
	Since      time.Time
	Calls      int // in the last minute
	Errors     int
	Sessions   int
	Pending    int
	HeapMB     string
	SysMB      string
	Goroutines int
	Virtual    []VirtualServer
}

func (c *Console) overview(r *http.Request) (string, any, error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mb := func(n uint64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) }
	d := overviewData{Upstreams: c.src.Upstreams(), Sessions: c.src.Sessions(),
		Pending: len(c.ops.PendingToolChanges()), HeapMB: mb(ms.HeapInuse), SysMB: mb(ms.Sys), Goroutines: runtime.NumGoroutine(),
		Virtual: c.src.VirtualServers()}
	d.Stats, d.Since = c.tail.serverStats()
	calls, errs := c.tail.rates()
	for i := range calls {
		d.Calls += calls[i]
		d.Errors += errs[i]
	}
	return "overview.html", d, nil
}

// kinds are the catalogue's tabs: the kind Source.Offers takes, and its
// label.
var kinds = []struct{ Kind, Label string }{
	{"tools", "Tools"}, {"prompts", "Prompts"}, {"resources", "Resources"}, {"resourceTemplates", "Resource templates"},
}

type catalogueData struct {
	Kind, Label string
	Kinds       []struct{ Kind, Label string }
	Query       string
	Items       []Tool
	Total       int
	Page, Last  int
	Prev, Next  string
	Pending     []admin.PendingToolChange
	// VS is the virtual server whose view is shown ("": the whole
	// catalogue); Virtual lists them all, to switch.
	VS      string
	Virtual []VirtualServer
}

// kindOf is the catalogue kind a query names (tools when none).
func kindOf(q url.Values) (kind, label string) {
	for _, k := range kinds {
		if k.Kind == q.Get("kind") {
			return k.Kind, k.Label
		}
	}
	return "tools", "Tools"
}

// offers lists the catalogue's items of kind, or those the sessions of
// the virtual server vs see.
func (c *Console) offers(vs, kind string) ([]Tool, error) {
	if vs == "" {
		return c.src.Offers(kind), nil
	}
	all, ok := c.src.VirtualOffers(vs, kind)
	if !ok {
		return nil, admin.Errorf(http.StatusNotFound, "not_found", "there is no virtual server %q", vs)
	}
	return all, nil
}

func (c *Console) catalogue(r *http.Request) (string, any, error) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := catalogueData{Kinds: kinds, Query: q, Pending: c.ops.PendingToolChanges(), VS: r.URL.Query().Get("vs"), Virtual: c.src.VirtualServers()}
	d.Kind, d.Label = kindOf(r.URL.Query())
	all, err := c.offers(d.VS, d.Kind)
	if err != nil {
		return "", nil, err
	}
	if q != "" {
		lq := strings.ToLower(q)
		kept := all[:0:0]
		for _, t := range all {
			if strings.Contains(strings.ToLower(t.Server+" "+t.Name+" "+t.Catalogue+" "+t.Description), lq) {
				kept = append(kept, t)
			}
		}
		all = kept
	}
	d.Total = len(all)
	d.Last = max(0, (len(all)-1)/pageSize)
	d.Page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	d.Page = min(max(d.Page, 0), d.Last)
	d.Items = all[d.Page*pageSize : min(len(all), (d.Page+1)*pageSize)]
	link := func(p int) string {
		v := url.Values{"page": {strconv.Itoa(p)}}
		if q != "" {
			v.Set("q", q)
		}
		if d.Kind != "tools" {
			v.Set("kind", d.Kind)
		}
		if d.VS != "" {
			v.Set("vs", d.VS)
		}
		return "/ui/catalogue?" + v.Encode()
	}
	if d.Page > 0 {
		d.Prev = link(d.Page - 1)
	}
	if d.Page < d.Last {
		d.Next = link(d.Page + 1)
	}
	return "catalogue.html", d, nil
}

type itemData struct {
	Kind, Label string
	Item        Tool
	Def         string // indented
	VS          string
}

// catalogueItem shows one offer's definition as the upstream sent it (or
// as a virtual server's sessions see it): a tool's input and output
// schemas, a prompt's arguments, a resource's MIME type.
func (c *Console) catalogueItem(r *http.Request) (string, any, error) {
	q := r.URL.Query()
	d := itemData{VS: q.Get("vs")}
	d.Kind, d.Label = kindOf(q)
	all, err := c.offers(d.VS, d.Kind)
	if err != nil {
		return "", nil, err
	}
	for _, it := range all {
		if it.Server == q.Get("server") && it.Name == q.Get("name") {
			d.Item = it
			var b bytes.Buffer
			if json.Indent(&b, it.Def, "", "  ") != nil {
				b.Reset()
				b.Write(it.Def)
			}
			d.Def = b.String()
			return "item.html", d, nil
		}
	}
	return "", nil, admin.Errorf(http.StatusNotFound, "not_found", "%s offers no %s named %q now", q.Get("server"), strings.TrimSuffix(strings.ToLower(d.Label), "s"), q.Get("name"))
}

// pinAction approves or rejects a changed tool definition.
func (c *Console) pinAction(r *http.Request) (string, any, error) {
	server, tool := r.PostFormValue("server"), r.PostFormValue("tool")
	var err error
	switch action := r.PostFormValue("action"); action {
	case "approve":
		err = c.ops.ApproveToolChange(r.Context(), server, tool)
	case "reject":
		err = c.ops.RejectToolChange(r.Context(), server, tool)
	default:
		err = admin.Errorf(http.StatusBadRequest, "bad_action", "unknown action %q: approve or reject", action)
	}
	c.record(r, "tool."+r.PostFormValue("action"), server+"/"+tool, err)
	if err != nil {
		return "", nil, err
	}
	return "redirect:/ui/catalogue", nil, nil
}

type policiesData struct {
	Generation uint64
	Policies   []admin.PolicyInfo
	Modules    []admin.ModuleInfo
	// NoModules says why modules cannot be listed (no module store).
	NoModules    string
	Interceptors []Interceptor
	// ShadowDiffs are the last shadow decisions that differed from the
	// enforced ones, newest first, as the log (the live tail) has them.
	ShadowDiffs []Entry
	// AuditDecisions are the last refusals and payload changes of audit
	// interceptors that did not block, newest first, from the log.
	AuditDecisions []Entry
}

// auditMsgs are the log messages of an audit interceptor's decision that
// did not block: each one's (interceptchain.Run, at INFO) and the chain's
// own (at WARN, at most once a minute per interceptor).
var auditMsgs = []string{"audit interceptor would have refused", "audit interceptor would have changed the payload",
	"audit validator refused", "audit mutator would change the payload"}

// shadowDiffMsg is the policy engine's log message of a shadow decision
// that differs from the enforced one.
const shadowDiffMsg = "policy shadow decision differs"

// maxShadowDiffs is how many the policies page shows.
const maxShadowDiffs = 10

// Interceptor is one member of the interceptor chain, in chain order.
type Interceptor struct {
	Name, Type                       string
	Calls, Denials, Failures, Audits int64
	// Mode is audit or active; ModeOverride says a promotion or
	// demotion set it until the next reload. P50Micros is the median
	// duration of its last calls. The policies page fills these from the
	// admin listing.
	Mode         string
	ModeOverride bool
	P50Micros    int64
}

func (c *Console) policies(r *http.Request) (string, any, error) {
	gen, pols := c.ops.ListPolicies()
	d := policiesData{Generation: gen, Policies: pols, Interceptors: c.interceptors()}
	for _, e := range c.tail.recent(filter{Kind: KindLog}) {
		if strings.HasPrefix(e.Text, shadowDiffMsg+" ") && len(d.ShadowDiffs) < maxShadowDiffs {
			e.Text = strings.TrimPrefix(e.Text, shadowDiffMsg+" ")
			d.ShadowDiffs = append(d.ShadowDiffs, e)
		}
		for _, m := range auditMsgs {
			if strings.HasPrefix(e.Text, m+" ") && len(d.AuditDecisions) < maxShadowDiffs {
				d.AuditDecisions = append(d.AuditDecisions, e)
			}
		}
	}
	var err error
	var ae *admin.Error
	if d.Modules, err = c.ops.ListModules(); errors.As(err, &ae) {
		d.NoModules = ae.Reason
	} else if err != nil {
		return "", nil, err
	}
	return "policies.html", d, nil
}

// interceptors are the chain's members in chain order, with their mode
// and latency from the admin listing.
func (c *Console) interceptors() []Interceptor {
	ics := c.src.Interceptors()
	listing := c.ops.Interceptors().Interceptors
	at := map[string]int{}
	for j, l := range listing {
		if l.InChain {
			at[l.Name] = j
		}
	}
	for i, ic := range ics {
		if j, ok := at[ic.Name]; ok {
			l := listing[j]
			ics[i].Mode, ics[i].ModeOverride, ics[i].P50Micros = l.Mode, l.ModeOverride, l.P50Micros
		}
	}
	return ics
}

// interceptorAction promotes an audit interceptor (action promote) or
// demotes one (demote) until the next reload.
func (c *Console) interceptorAction(r *http.Request) (string, any, error) {
	name := r.PostFormValue("name")
	var err error
	switch action := r.PostFormValue("action"); action {
	case "promote":
		_, err = admin.ChangeInterceptorMode(r.Context(), c.ops, name, "active")
	case "demote":
		_, err = admin.ChangeInterceptorMode(r.Context(), c.ops, name, "audit")
	default:
		err = admin.Errorf(http.StatusBadRequest, "bad_action", "unknown action %q: promote or demote", action)
	}
	c.record(r, "interceptor."+r.PostFormValue("action"), name, err)
	if err != nil {
		return "", nil, err
	}
	return "redirect:/ui/policies", nil, nil
}

// policyAction promotes a shadow attachment, detaches one, moves one in
// the chain (up, down, or to a 1-based position), or
// attaches a stored module.
func (c *Console) policyAction(r *http.Request) (string, any, error) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	action := r.PostFormValue("action")
	var err error
	switch action {
	case "promote":
		err = c.ops.PromotePolicy(r.Context(), name)
	case "detach":
		err = c.ops.DetachPolicy(r.Context(), name)
	case "up", "down", "move":
		err = c.move(r, name, action, strings.TrimSpace(r.PostFormValue("position")))
	case "attach":
		err = c.attach(r, name)
	default:
		err = admin.Errorf(http.StatusBadRequest, "bad_action", "unknown action %q: promote, detach, up, down, move or attach", action)
	}
	c.record(r, "policy."+action, name, err)
	if err != nil {
		return "", nil, err
	}
	return "redirect:/ui/policies", nil, nil
}

// move moves the attachment name up or down one place, or to position
// (1-based), and applies the new order as one reorder (the same atomic
// change as PUT /admin/policies/order).
func (c *Console) move(r *http.Request, name, how, position string) error {
	_, pols := c.ops.ListPolicies()
	order := make([]string, len(pols))
	for i, p := range pols {
		order[i] = p.Name
	}
	i := slices.Index(order, name)
	if i < 0 {
		return admin.Errorf(http.StatusNotFound, "not_found", "no policy %q is attached", name)
	}
	to, err := destination(i, len(order), how, position)
	if err != nil {
		return err
	}
	if to == i {
		return admin.Errorf(http.StatusBadRequest, "bad_order", "%q is at position %d already", name, i+1)
	}
	order = slices.Insert(slices.Delete(order, i, i+1), to, name)
	return c.ops.ReorderPolicies(r.Context(), order)
}

// destination is where a move puts the attachment at index i of n.
func destination(i, n int, how, position string) (int, error) {
	switch how {
	case "up":
		return max(i-1, 0), nil
	case "down":
		return min(i+1, n-1), nil
	}
	p, err := strconv.Atoi(position)
	if err != nil || p < 1 || p > n {
		return 0, admin.Errorf(http.StatusBadRequest, "bad_position", "position %q: a number from 1 to %d", position, n)
	}
	return p - 1, nil
}

// attach attaches a stored module as the form describes it: tools and
// servers comma-separated globs (none: all), mode shadow or enforce,
// position 1-based (empty: last).
func (c *Console) attach(r *http.Request, name string) error {
	split := func(s string) []string {
		var out []string
		for _, f := range strings.Split(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	sp := spec.Spec{Name: name, Module: strings.TrimSpace(r.PostFormValue("module")), Tools: split(r.PostFormValue("tools")),
		Servers: split(r.PostFormValue("servers")), Mode: r.PostFormValue("mode")}
	pos := -1
	if p := strings.TrimSpace(r.PostFormValue("position")); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return admin.Errorf(http.StatusBadRequest, "bad_position", "position %q: a number from 1", p)
		}
		pos = n - 1
	}
	if sp.Name == "" || sp.Module == "" {
		return admin.Errorf(http.StatusBadRequest, "bad_attachment", "an attachment needs a name and a module")
	}
	return c.ops.AttachPolicy(r.Context(), sp, pos)
}

// maxUpload bounds a module uploaded from the console (the store's own
// limit, max_module_bytes, applies as well).
const maxUpload = 64 << 20

// uploadModule stores a module sent as a file of a multipart form.
func (c *Console) uploadModule(r *http.Request) (string, any, error) {
	name := strings.TrimSpace(r.PostFormValue("name"))
	f, hdr, err := r.FormFile("module")
	if err != nil {
		err = admin.Errorf(http.StatusBadRequest, "no_module", "choose the module file to upload: %v", err)
		c.record(r, "module.upload", name, err)
		return "", nil, err
	}
	defer f.Close()
	if name == "" {
		name = strings.TrimSuffix(hdr.Filename, ".wasm")
	}
	_, err = c.ops.UploadModule(r.Context(), admin.Upload{Name: name, Body: f, ContentLength: hdr.Size,
		Digest: strings.TrimSpace(r.PostFormValue("sha256")), Identity: admin.Identity(r.Context())})
	c.record(r, "module.upload", name, err)
	if err != nil {
		return "", nil, err
	}
	return "redirect:/ui/policies", nil, nil
}

func (c *Console) oauthPage(r *http.Request) (string, any, error) {
	return "oauth.html", c.ops.OAuthStatus(), nil
}

// oauthAction starts an authorization (the page then shows its link) or
// forgets a server's tokens.
func (c *Console) oauthAction(r *http.Request) (string, any, error) {
	server := r.PostFormValue("server")
	var err error
	switch action := r.PostFormValue("action"); action {
	case "login":
		_, err = c.ops.OAuthLogin(r.Context(), server)
	case "logout":
		err = c.ops.OAuthLogout(server, r.PostFormValue("identity"))
	default:
		err = admin.Errorf(http.StatusBadRequest, "bad_action", "unknown action %q: login or logout", action)
	}
	c.record(r, "oauth."+r.PostFormValue("action"), server, err)
	if err != nil {
		return "", nil, err
	}
	return "redirect:/ui/oauth", nil, nil
}

func (c *Console) fleetPage(r *http.Request) (string, any, error) {
	var st *fleet.Status
	if c.src != nil {
		st = c.src.Fleet(r.Context())
	}
	return "fleet.html", st, nil
}

// pullTimeout bounds a pull from a registry.
const pullTimeout = 2 * time.Minute

// pullModule fetches a module from an OCI registry (its signature checked
// against the public keys given, if any) and stores it as an upload
// would.
func (c *Console) pullModule(r *http.Request) (string, any, error) {
	reference := strings.TrimSpace(r.PostFormValue("ref"))
	name := strings.TrimSpace(r.PostFormValue("name"))
	err := func() error {
		ref, err := ociwasm.ParseRef(reference)
		if err != nil {
			return admin.Errorf(http.StatusBadRequest, "bad_reference", "%v", err)
		}
		var o ociwasm.Options
		if pem := strings.TrimSpace(r.PostFormValue("keys")); pem != "" {
			if o.Keys, err = ociwasm.ParseKeys(pem); err != nil {
				return admin.Errorf(http.StatusBadRequest, "bad_key", "the public key: %v", err)
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), pullTimeout)
		defer cancel()
		a, err := ociwasm.Pull(ctx, ref, o)
		if err != nil {
			return admin.Errorf(http.StatusBadGateway, "pull_failed", "%v", err)
		}
		if name == "" {
			name = ref.Repository[strings.LastIndexByte(ref.Repository, '/')+1:]
		}
		_, err = c.ops.UploadModule(r.Context(), admin.Upload{Name: name, Body: bytes.NewReader(a.Wasm), ContentLength: int64(len(a.Wasm)),
			Identity: admin.Identity(r.Context())})
		return err
	}()
	c.record(r, "module.pull", reference, err)
	if err != nil {
		return "", nil, err
	}
	return "redirect:/ui/policies", nil, nil
}
