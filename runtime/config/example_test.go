package config_test

import (
	"fmt"

	"github.com/edge-mcp/edge-mcp/runtime/config"
)

// A config is parsed against the key table; the first problem comes back
// as an error naming the file, the key path and the reason.
func ExampleParse() {
	cfg, err := config.Parse("gw.json", []byte(`{
  "mcpServers": {
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
    "docs": {"url": "https://docs.example.com/mcp", "timeout": 12.5}
  },
  "limits": {"client_rate": {"rps": 20, "burst": 40}}
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range cfg.Servers {
		fmt.Println(s.Name, s.Type, s.Timeout)
	}
	fmt.Println(cfg.Listen, cfg.Limits.ClientRate.RPS)

	_, err = config.Parse("gw.json", []byte(`{"mcpServers": {"docs": {"url": "https://docs.example.com/mcp", "timeout": "fast"}}}`))
	fmt.Println(err)
	_, err = config.Parse("gw.json", []byte(`{"limits": {"client_rate": {"rps": 0}}}`))
	fmt.Println(err)
	_, err = config.Parse("gw.json", []byte("{\n  \"listen\": \"127.0.0.1:8080\",\n}"))
	fmt.Println(err)
	// Output:
	// files stdio 1m0s
	// docs streamable-http 12.5s
	// 127.0.0.1:8080 20
	// config gw.json: mcpServers.docs.timeout: must be a positive number of seconds, got "fast"
	// config gw.json: limits.client_rate.rps: must be a positive number of calls per second, got 0
	// config gw.json: invalid JSON at line 3, column 1: invalid character '}' looking for beginning of object key string
}
