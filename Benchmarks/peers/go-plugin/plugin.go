// The peer's plugin for forsetti-bench --only peers: a go-plugin (net/rpc) plugin that answers
// one trivial RPC. Built by scripts/bench --peers against Debian's packaged go-plugin, offline.
package main

import (
	"net/rpc"
	"os"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
)

// Echo is the RPC server: it returns what it is given, as a host call returns a status.
type Echo struct{}

func (Echo) Echo(arg int, reply *int) error { *reply = arg; return nil }

// echoPlugin is go-plugin's net/rpc glue; the host side is never used in this process.
type echoPlugin struct{}

func (echoPlugin) Server(*plugin.MuxBroker) (interface{}, error)              { return Echo{}, nil }
func (echoPlugin) Client(*plugin.MuxBroker, *rpc.Client) (interface{}, error) { return nil, nil }

func main() {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion: 1, MagicCookieKey: "FORSETTI_BENCH_PEER", MagicCookieValue: "echo",
		},
		Plugins: map[string]plugin.Plugin{"echo": echoPlugin{}},
		// Quiet, as the host's logger is: the default traces every step to stderr.
		Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Error, JSONFormat: true}),
	})
}
