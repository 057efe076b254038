// Drops a test database, trying again for a while: `WITH (FORCE)` cannot end an autovacuum worker
// that happens to be in the database (a role that is not a superuser may not signal it, and
// PostgreSQL answers "must be a member of the role whose process is being terminated"), and such a
// worker finishes within moments. Kept outside test/ so the test runner does not load it as a test.
export async function dropDatabase(admin, name, { withinMs = 15_000, stepMs = 200 } = {}) {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      return;
    } catch (error) {
      if (Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, stepMs));
    }
  }
}
