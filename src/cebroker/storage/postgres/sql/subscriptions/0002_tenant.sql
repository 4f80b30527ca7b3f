-- Each subscription's tenant, indexed for tenant listings and the per-tenant count.
ALTER TABLE subscriptions ADD COLUMN tenant text;
CREATE INDEX subscriptions_tenant ON subscriptions (tenant, seq);
