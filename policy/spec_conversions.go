package policy

// This file turns a Spec, an attachment as operators configure it, into
// what Engine.Load and NewChain take: ModuleOptions and an Attachment.

// ModuleOptions returns the module options the spec describes (config,
// timeout, memory, pool size, grants), validated.
func (s *Spec) ModuleOptions() (ModuleOptions, error) { return s.options() }

// Attachment attaches m as the spec says: its name, globs, on_error and
// mode. m is typically loaded with the spec's ModuleOptions.
func (s *Spec) Attachment(m *Module) (Attachment, error) {
	onErr, err := ParseOnError(s.OnError)
	if err != nil {
		return Attachment{}, err
	}
	return Attachment{Name: s.Name, Module: m, Tools: s.Tools, Servers: s.Servers, OnError: onErr,
		Shadow: s.Mode == ModeShadow}, nil
}
