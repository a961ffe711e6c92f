// Package config reads and validates edge-mcp's configuration file: JSON
// in the shape Claude Desktop uses ({"mcpServers": {...}}), extended with
// gateway settings.
//
// Every key the file may hold is one entry of a single table (keys.go): its
// path, type, default, check and a line of documentation. One decoder walks
// the JSON object along that table, reporting the first problem as an
// *Error that names the file, the key path and the reason; the tables of
// docs/configuration.md are tested against the same table.
//
// The package knows no gateway types: it turns bytes into a Config of plain
// values (and spec.Spec attachments), and the gateway decides what they
// mean at run time.
package config
