// Verifies every delivery the test receiver recorded with the npm `standardwebhooks` package,
// for scripts/check-signatures.sh. Compiled with tsc, run with node.
//   node verify_outbound.js RECORDED.json OLD_SECRET NEW_SECRET
// Each delivery names the secrets it must verify under ("old", "new") and must fail under the
// others. Prints one summary line; exits 1 on the first surprise.
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";

interface Delivery {
  path: string;
  headers: Record<string, string>;
  body: string;
  accepts: string[];
}

const [file, oldSecret, newSecret] = process.argv.slice(2);
const deliveries: Delivery[] = JSON.parse(readFileSync(file, "utf8"));
const hooks: Record<string, Webhook> = { old: new Webhook(oldSecret), new: new Webhook(newSecret) };
let checks = 0;
for (const delivery of deliveries) {
  for (const [name, hook] of Object.entries(hooks)) {
    let verified = true;
    try {
      hook.verify(delivery.body, delivery.headers);
    } catch {
      verified = false;
    }
    const expected = delivery.accepts.includes(name);
    if (verified !== expected) {
      console.error(
        `verify_outbound: ${delivery.path} webhook-id ${delivery.headers["webhook-id"]}: ` +
          `the ${name} secret ${verified ? "verified" : "did not verify"} it`,
      );
      process.exit(1);
    }
    checks += 1;
  }
}
console.log(`npm standardwebhooks: ${deliveries.length} deliveries, ${checks} checks, 0 surprises`);
