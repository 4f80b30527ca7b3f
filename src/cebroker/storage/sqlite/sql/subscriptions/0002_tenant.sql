-- Each subscription's tenant, indexed for tenant listings and the per-tenant count.
ALTER TABLE subscriptions ADD COLUMN tenant TEXT;
CREATE INDEX IF NOT EXISTS subscriptions_tenant ON subscriptions (tenant, seq);
