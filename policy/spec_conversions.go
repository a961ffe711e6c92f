package policy

// This file turns a Spec, an attachment as operators configure it, into
// what Engine.Load and NewChain take: ModuleOptions and an Attachment.

// SpecOptions returns the module options s describes (config, timeout,
// memory, pool size, grants), validated.
func SpecOptions(s *Spec) (ModuleOptions, error) { return optionsOf(s) }

// SpecAttachment attaches m as s says: its name, globs, on_error and mode.
// m is typically loaded with the spec's SpecOptions.
func SpecAttachment(s *Spec, m *Module) (Attachment, error) {
	onErr, err := ParseOnError(s.OnError)
	if err != nil {
		return Attachment{}, err
	}
	return Attachment{Name: s.Name, Module: m, Tools: s.Tools, Servers: s.Servers, OnError: onErr,
		Shadow: s.Mode == ModeShadow}, nil
}
