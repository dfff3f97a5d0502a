-- The bundled INE/DEIS aggregates carry no cause of death: the causes port is empty in this
-- mode (same columns and contract as the microdata mode's), so the causes room builds in both.
select
    cast(null as varchar) as commune_code,
    cast(null as integer) as year,
    cast(null as integer) as icd_revision,
    cast(null as varchar) as cause_status,
    cast(null as varchar) as cause_group,
    cast(null as varchar) as reducible_group,
    cast(null as boolean) as is_reducible,
    cast(null as bigint) as deaths
where false
