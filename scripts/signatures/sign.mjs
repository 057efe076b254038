// Signs with the providers' own npm packages, for scripts/check-signatures.sh.
// Reads a JSON list of jobs on stdin, writes the list of signature header values on stdout:
//   {"lib": "standardwebhooks", "secret": "whsec_...", "id": "...", "timestamp": 1700000000, "body": "..."}
//   {"lib": "octokit", "secret": "...", "body": "..."}
import { Webhook } from "standardwebhooks";
import { sign } from "@octokit/webhooks-methods";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const jobs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = [];
for (const job of jobs) {
  if (job.lib === "standardwebhooks") {
    out.push(new Webhook(job.secret).sign(job.id, new Date(job.timestamp * 1000), job.body));
  } else if (job.lib === "octokit") {
    out.push(await sign(job.secret, job.body));
  } else {
    throw new Error(`unknown lib ${job.lib}`);
  }
}
process.stdout.write(JSON.stringify(out));
