package gateway

// This file is where the gateway keeps its persistent state: the running
// config's state folder (config.Config.StateDirUnder, under the command
// line's Options.StateDir); its observers (metrics, audit log, traces,
// validator, pins) are opened by runtime/observe.

// StateDir is the folder of the running config's persistent state (module
// store, attachments, tool pins, OAuth tokens), "" when it is kept in
// memory.
func (g *Gateway) StateDir() string { return g.config().StateDirUnder(g.opts.StateDir) }
