-- Microdata mode: one row per infant death counted in a commune-year, with its underlying cause
-- classified (docs/methods/causes.md). Nothing is dropped: a death whose DIAG1 is blank is
-- cause_unknown, one whose DIAG1 is not a code of its year's ICD revision (or in no chapter) is
-- cause_invalid; both stay infant deaths, in no cause group, and are audited
-- (int_audit__deis_records). Codes were normalised once, in stg_deis__deaths (trimmed, upper
-- case, dots removed: `p07.3` is `P073`).
with infants as (
    select
        source_file,
        source_line,
        commune_code,
        year_of_death as year,
        {{ deis_counted_age_class('age_class') }} as age_class,
        cause_icd10 as diag1,
        external_cause_icd10 as diag2
    from {{ ref('stg_deis__deaths') }}
    where {{ deis_is_assignable('record_problem', 'year_of_death') }}
        and {{ deis_counted_age_class('age_class') }} in {{ deis_infant_age_classes() }}
),

-- The category (3 characters; 4 for ICD-9's E codes) when DIAG1 has the shape of a code of the
-- revision in force in its year: ICD-10 a letter, two digits and an optional fourth character
-- (a digit, or X for a category without subdivisions: R95X); ICD-9 three digits and an optional
-- fourth, or E800-E999 with an optional fourth digit. Anything else (P0, 7651 in 2015, P073 in
-- 1995, P07.30 -> P0730) has no category.
revised as (
    select
        *,
        case when year >= {{ deis_icd10_first_year() }} then 10 else 9 end as icd_revision,
        case
            when year >= {{ deis_icd10_first_year() }}
                then case when regexp_full_match(diag1, '[A-Z][0-9]{2}[0-9X]?') then left(diag1, 3) end
            when regexp_full_match(diag1, 'E[89][0-9]{2}[0-9]?') then left(diag1, 4)
            when regexp_full_match(diag1, '[0-9]{3}[0-9X]?') then left(diag1, 3)
        end as cause_category,
        -- An injury death's external cause (DIAG2, ICD-10 V01-Y98), when DIAG2 is one.
        case
            when year >= {{ deis_icd10_first_year() }} and regexp_full_match(diag2, '[A-Z][0-9]{2}[0-9X]?')
                and left(diag2, 3) between 'V01' and 'Y98' then diag2
        end as external_cause
    from infants
),

chaptered as (
    select
        revised.*,
        chapters.chapter as cause_chapter,
        case
            when revised.diag1 is null then 'cause_unknown'
            when chapters.chapter is null then 'cause_invalid'
            else 'coded'
        end as cause_status,
        chapters.cause_group
    from revised
    left join {{ ref('icd_cause_groups') }} as chapters
        on revised.icd_revision = chapters.icd_revision
        and revised.cause_category between chapters.category_from and chapters.category_to
),

-- The code the reducible-causes list is read on: an injury death (DIAG1 in chapter XIX, S00-T98)
-- by its external cause (DIAG2), as the list codes it; any other death by DIAG1. ICD-10 only.
listed as (
    select
        *,
        case
            when cause_status = 'coded' and icd_revision = 10
                then case when cause_chapter = 'XIX' and external_cause is not null then external_cause else diag1 end
        end as reducible_list_code
    from chaptered
)

select
    listed.source_file,
    listed.source_line,
    listed.commune_code,
    listed.year,
    listed.age_class,
    listed.diag1,
    listed.diag2,
    listed.icd_revision,
    listed.cause_status,
    listed.cause_category,
    listed.cause_chapter,
    listed.cause_group,
    listed.reducible_list_code,
    -- A listed ICD-10 code in none of the list's groups is a "not clearly avoidable" cause.
    case when listed.reducible_list_code is not null then coalesce(reducible.reducible_group, 'not_clearly_avoidable') end
        as reducible_group,
    case when listed.reducible_list_code is not null then coalesce(reducible.is_reducible, false) end as is_reducible
from listed
-- A code of 3 or 4 characters is in a row's range when its first characters, as many as the
-- bounds have, lie between them: R95X is in R95-R95, P969 in P969-P969 and not in P960-P968.
left join {{ ref('reducible_causes_under5') }} as reducible
    on left(listed.reducible_list_code, length(reducible.code_from)) >= reducible.code_from
    and left(listed.reducible_list_code, length(reducible.code_to)) <= reducible.code_to
