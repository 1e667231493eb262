"""A Python MCP client for toolgate (the official `mcp` package, 2.x).

It sends the bearer token, lists the tools, runs a short command, and goes through long work the
portable way: `start_process` returns a handle at once, and `read_process_output` pages the
output by offset until the process has ended. No request stays open longer than a poll, so no
client timeout matters, whatever the client.

Usage: TOOLGATE_URL=http://127.0.0.1:3000/ TOOLGATE_TOKEN=... python3 toolgate_client.py
"""

import asyncio
import os

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def main() -> None:
    url = os.environ.get("TOOLGATE_URL", "http://127.0.0.1:3000/")
    headers = {"Authorization": f"Bearer {os.environ['TOOLGATE_TOKEN']}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                print("tools:", ", ".join(sorted(t.name for t in tools.tools)))

                short = await session.call_tool("run_command", {"command": "echo hello from python"})
                print("short:", short.structured_content["stdout"].strip())

                # Long work: a handle now, then the output page by page until the process ends.
                started = await session.call_tool(
                    "start_process", {"command": "for i in 1 2 3; do echo step $i; sleep 1; done"}
                )
                handle = started.structured_content["handle"]
                offset = 0
                while True:
                    page = await session.call_tool(
                        "read_process_output", {"handle": handle, "offset": offset, "wait_ms": 2000}
                    )
                    out = page.structured_content
                    print(out["data"], end="")
                    offset = out["nextOffset"]
                    if not out["running"] and not out["more"]:
                        print("exit code:", out.get("exitCode"))
                        break


if __name__ == "__main__":
    asyncio.run(main())
