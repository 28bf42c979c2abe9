"""Running the hfuse CLI from the bench scripts: a command's output, or the script stopped with the
command's error; the JSON object a `--json` command prints last."""
import json
import os
import subprocess
import sys


def run(cmd):
    """stdout of `cmd`; on failure, exits naming the script, the command and its stderr."""
    tool = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("%s: failed (%d): %s\n%s" % (tool, p.returncode, " ".join(cmd), p.stderr.strip()))
    return p.stdout


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])
